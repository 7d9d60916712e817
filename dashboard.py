"""mcqaudit dashboard (Streamlit entry point): navigation only. Start it with `mcqaudit dashboard [STUDY]`."""

from mcqaudit.ui.app import main

main()
