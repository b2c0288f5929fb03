// The Python acspeed's programs start (acspeed-tune's trial workers, acspeed-testbed --torchrun)
// and where this build's acspeed package is.
#pragma once

#include <string>

namespace acspeed {

// ACSPEED_PYTHON, else the interpreter recorded when acspeed was built (ACSPEED_DEFAULT_PYTHON).
std::string python_interpreter();
// The folder holding this build's acspeed Python package (ACSPEED_PYTHON_SOURCE_DIR), or "" when
// it is not there (an installed copy without the checkout).
std::string python_source_dir();

}  // namespace acspeed
