"""`kbisect doctor`: can this host build, boot and measure kernels?"""
