// Arm NN inference shim (condensed)
extern "C" int ann_version() { return 1; }
