"""kernelgen: spec -> render -> compile -> profile -> reduce -> header.

Pure Python; the SCons tools under ``site_scons/site_tools`` only wire these
functions into builders.
"""
