"""spark-submit entry point of the write step, for deployments that submit a file from this folder.

mvsink itself submits the copy shipped inside the package (``mvsink/spark/mv_write.py``, found
with ``mvsink.spark.runners.job_file()``); both run the same ``mvsink.spark.job.main``:

    spark-submit spark_jobs/mv_write.py --view-file dags/views/v.yaml --description '{...}' [--report out.json]
"""

import sys

from mvsink.spark.job import main

if __name__ == "__main__":
    sys.exit(main())
