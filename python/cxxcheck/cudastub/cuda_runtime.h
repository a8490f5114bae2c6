/* cuda_runtime.h: see gmlake_cudastub.h */
#include "gmlake_cudastub.h"
