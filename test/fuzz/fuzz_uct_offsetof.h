/*
 * Forced first include of the transport harnesses (-include): UCX's
 * ucs_offsetof() takes a member address through a null pointer, which
 * clang's -fsanitize=null reports at every ucs_derived_of(); the
 * compiler's offsetof computes the same constant without it.
 */
#ifndef FUZZ_UCT_OFFSETOF_H
#define FUZZ_UCT_OFFSETOF_H

#include <stddef.h>
#include <ucs/sys/compiler_def.h>

#undef ucs_offsetof
#define ucs_offsetof(_type, _member) offsetof(_type, _member)

#endif
