// The Python acspeed's programs start (acspeed-tune's trial workers, acspeed-testbed --torchrun)
// and where the acspeed package they belong to is. Nothing here is recorded at build time: an
// installed program (a wheel puts it in <site-packages>/acspeed/bin/) finds both relative to itself.
#pragma once

#include <string>

namespace acspeed {

// ACSPEED_PYTHON; else the interpreter of the environment this program is installed in
// (installed_python_for); else "python3", looked up on PATH.
std::string python_interpreter();
// The folder that holds the acspeed package this program is installed in (the site-packages
// folder above acspeed/bin/), or "" for a program that is not installed in a package (the build
// folder's bin/).
std::string python_source_dir();

// For a program at `program`: the package root as python_source_dir() describes it, and the
// interpreter of that environment, <prefix>/bin/pythonX.Y for a package in
// <prefix>/lib/pythonX.Y/site-packages (a venv, a pyenv or a system prefix), when that file is
// executable; "" when either is not there. Exposed for the tests.
std::string installed_package_root_for(const std::string& program);
std::string installed_python_for(const std::string& program);

}  // namespace acspeed
