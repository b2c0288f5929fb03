// The Python interpreter acspeed's programs start: acspeed-tune's trial workers and
// acspeed-testbed --torchrun.
#pragma once

#include <string>

namespace acspeed {

// ACSPEED_PYTHON, else the interpreter recorded when acspeed was built (ACSPEED_DEFAULT_PYTHON).
std::string python_interpreter();

}  // namespace acspeed
