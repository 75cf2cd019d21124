"""`python -m jaxsim`."""

import sys

from jaxsim.cli import main

sys.exit(main())
