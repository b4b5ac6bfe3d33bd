import sys

from onward.cli.main import main

sys.exit(main())
