"""Git reconciliation: commit trailers (``trailers``), what a ref has integrated (``log``, real git,
read-only), and ulpi's reconciliation table (``reconcile``)."""
