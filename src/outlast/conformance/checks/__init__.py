"""The checks of docs/resumable-ag-ui.md, one function each, grouped by what they
look at. A check sends only what the document defines, judges only what comes back
over HTTP, and says why."""
