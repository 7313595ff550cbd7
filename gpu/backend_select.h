/* Former name of cuda_module.h (the device option -> a backend now lives in core/model/backend_registry.c);
 * kept so that files that still include it compile until their includes are updated. */
#ifndef PGCL_BACKEND_SELECT_H
#define PGCL_BACKEND_SELECT_H

#include "cuda_module.h"

#endif
