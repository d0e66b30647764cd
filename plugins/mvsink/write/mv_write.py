"""spark-submit entry script of the write step, shipped inside the package.

    spark-submit $(python -c 'from mvsink.write.runners import job_file; print(job_file())') \
        --view-file dags/views/v.yaml --description '{...}' [--report out.json]

:func:`mvsink.write.runners.job_file` finds this file with ``importlib.resources``, so an
installed wheel runs refreshes without the repository.
"""

import sys

from mvsink.write.job import main

if __name__ == "__main__":
    sys.exit(main())
