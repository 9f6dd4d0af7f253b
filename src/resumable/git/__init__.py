"""Git reconciliation: commit trailers (``trailers``), what a ref has integrated (``log``, real git,
read-only), and the seed's reconciliation table (``reconcile``)."""
