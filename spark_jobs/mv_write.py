"""spark-submit entry point of the write step: computes and stages a view's corrections.

    spark-submit spark_jobs/mv_write.py --view-file dags/views/v.yaml --description '{...}' [--report out.json]
"""

import sys

from mvsink.spark.job import main

if __name__ == "__main__":
    sys.exit(main())
