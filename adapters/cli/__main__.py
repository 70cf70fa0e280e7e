"""`python -m adapters.cli ...`: the same as the `kctl` console script."""
import sys

from adapters.cli.kctl import main

sys.exit(main())
