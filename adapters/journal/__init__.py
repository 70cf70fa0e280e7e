"""The controller journal on disk: its file format and reader (format.py, standard library only,
shipped to Spark executors) and its write-ahead writer (writer.py). The controller writes it; the
replay and the offline tools read it."""
