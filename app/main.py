"""The Streamlit app: live pages (Prometheus and the Parquet history) and the what-if page.

Run by ``kobs app`` (``streamlit run app/main.py``); each live page is a script under ``app/views/``, not
``pages/``: Streamlit serves a ``pages/`` folder by itself, without this navigation or layout, to a browser
whose first request is a page's URL (a runbook link, say).
"""

from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # streamlit runs this file as a script

HERE = Path(__file__).parent


def page(script: str, title: str, icon: str, **options) -> st.Page:
    return st.Page(HERE / script, title=title, icon=f":material/{icon}:", **options)


PAGES = {  # URL paths: / (health), /lag, /throughput, /producers, /whatif, /runbooks
    "Live": [
        page("views/health.py", "Cluster health", "monitor_heart", default=True),
        page("views/lag.py", "Consumer lag", "hourglass_top"),
        page("views/throughput.py", "Throughput vs stored data", "scatter_plot"),
        page("views/producers.py", "Producers", "traffic"),
    ],
    "Plan": [page("whatif_page.py", "What if", "calculate", url_path="whatif")],
    "Help": [page("views/runbooks.py", "Runbooks", "menu_book", url_path="runbooks")],
}

st.set_page_config(page_title="Kafka Observatory", layout="wide")
st.navigation(PAGES).run()
