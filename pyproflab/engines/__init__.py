"""Engines other than the embedded DuckDB store, over the same data.

``spark_ingest`` writes the Parquet dataset ``pyproflab export --parquet`` writes
(``store/parquet.py``), from profile files, on Spark; ``spark_query`` answers
questions over such a dataset on Spark with the store's result objects
(``spark_regressions``: the reads of the regression analysis on Spark). The
dataset is the contract: DuckDB and Spark read the same files and give the same
numbers. pyspark is an optional extra (``pyproflab[spark]``); nothing here is
imported by the rest of the package except on request.
"""
