"""The Streamlit app (live pages, what-if) and the capacity model it shares with ``kobs whatif``."""

CONFIG_ENV = "KOBS_CONFIG"  # the configuration file the app reads; set by ``kobs app --config``
