# SPDX-License-Identifier: GPL-3.0-or-later
"""Stand-in for ansible-test's get-pip bootstrap script, whose download host may be unreachable.

Like get-pip.py, it installs pip and then the packages named on its command line with `pip install`,
but takes pip from the interpreter's bundled wheel (ensurepip) instead of an embedded copy.
"""

import ensurepip
import subprocess
import sys

# get-pip.py's own switches: it installs setuptools and wheel unless told not to; this never does.
OWN_SWITCHES = ("--no-setuptools", "--no-wheel")

ensurepip.bootstrap(upgrade=True)
subprocess.check_call([sys.executable, "-m", "pip", "install"] + [a for a in sys.argv[1:] if a not in OWN_SWITCHES])
