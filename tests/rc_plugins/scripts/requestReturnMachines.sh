#!/bin/sh
# requestReturnMachines.sh -f INPUT.json: the test plugin of XCE's script provider (rcplugin.py).
exec "${RC_PYTHON:-python3}" -S "$(dirname "$0")/rcplugin.py" requestReturnMachines "$@"
