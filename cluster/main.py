"""spark-submit entry point of the post-mortem job (see README.md)."""

import sys

from metaroce_cluster.job import main

sys.exit(main())
