"""The Streamlit app: live pages (Prometheus and the Parquet history) and the what-if page.

Run by ``kobs app`` (``streamlit run app/main.py``); each page is a script under ``app/pages/``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # streamlit runs this file as a script

HERE = Path(__file__).parent
PAGES = {
    "Live": [
        st.Page(HERE / "pages" / "health.py", title="Cluster health", icon="🩺", default=True),
        st.Page(HERE / "pages" / "lag.py", title="Consumer lag", icon="⏳"),
        st.Page(HERE / "pages" / "throughput.py", title="Throughput vs stored data", icon="📈"),
        st.Page(HERE / "pages" / "producers.py", title="Producers", icon="🚦"),
    ],
    "Plan": [st.Page(HERE / "whatif_page.py", title="What if", icon="🧮")],
}

st.set_page_config(page_title="Kafka Observatory", layout="wide")
st.navigation(PAGES).run()
