"""The dashboard's Streamlit entry inside the package (used when ``dashboard.py`` of a source checkout is
absent, e.g. in an installed wheel): navigation only."""

from mcqaudit.ui.app import main

main()
