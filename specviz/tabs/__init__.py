"""One module per tab of the page that has outgrown app.py; each has build(ui, ...) and only page code."""
