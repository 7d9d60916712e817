"""The Streamlit dashboard: the only package that imports streamlit.

``app`` routes (``st.navigation``); ``pages`` holds one module per page, each a ``render_*`` function fed with
DataFrames and report dicts plus a ``page()`` entry that loads them; ``data`` is the cached access to the
study file; ``state`` names every session-state key; ``components`` are small shared widgets.
"""
