"""Runbooks: what to do for each alert. ``?alert=<name>`` opens that alert's section (the alert rules' and
dashboards' default runbook links); ``?file=<name>.md`` a whole runbook."""

from __future__ import annotations

import streamlit as st

from app import live, runbooks

books = runbooks.load()
st.title("Runbooks")
alert = st.query_params.get("alert")
if alert:
    found = runbooks.find(books, alert)
    if found:
        book, text = found
        st.header(alert, anchor=False)
        st.markdown(runbooks.app_links(text, books))
        st.caption(f"From docs/runbooks/{book.file}. The other alerts of this runbook follow below.")
        st.query_params["file"] = book.file
    else:
        asked = live.plain(repr(alert))
        st.error(f"No runbook has a section for alert {asked}; the runbooks are listed below.")
names = list(books)
chosen = st.query_params.get("file")
file = st.selectbox("Runbook", names, index=names.index(chosen) if chosen in names else 0)
book = books[file]
st.markdown(runbooks.app_links(book.intro, books))
for name, text in book.sections.items():
    with st.expander(name, expanded=not alert):
        st.markdown(runbooks.app_links(text, books))
