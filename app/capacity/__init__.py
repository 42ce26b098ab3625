"""The capacity model shared by the CLI (``kobs whatif``), the Streamlit app and the tests; no UI imports."""
