"""The QA tab: extractive answers with start/end scores."""
