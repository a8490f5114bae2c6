/* cuda_fp16.h: see gmlake_cudastub.h */
#include "gmlake_cudastub.h"
