"""spark-submit entry point of the write step, for deployments that submit a file from this folder.

mvsink itself submits the copy shipped inside the package (``mvsink/write/mv_write.py``, found
with ``mvsink.write.runners.job_file()``); both run the same ``mvsink.write.job.main``:

    spark-submit spark_jobs/mv_write.py --view-file dags/views/v.yaml --description '{...}' [--report out.json]
"""

import sys

from mvsink.write.job import main

if __name__ == "__main__":
    sys.exit(main())
