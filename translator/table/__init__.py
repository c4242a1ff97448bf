"""Every run's result as one row (rows.py), the Parquet dataset of them (parquet.py), and
`translator report`, which reads that dataset back (report.py)."""
