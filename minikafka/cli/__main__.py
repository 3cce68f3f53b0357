"""``python -m minikafka.cli``: the same command as the ``minikafka`` console script."""

import sys

from . import main

sys.exit(main())
