// Prefill attention on the CPU, tiled over queries. PagedAttention hands it
// the sequences with more than one query token in the step; decodes keep the
// per-token path of attention.cc.
#pragma once

#include <cstdint>

#include "kernels/attention.h"
#include "kernels/parallel.h"

namespace loom::kernels::cpu {

// Whether PagedAttention sends sequence s to PrefillAttention: more than one
// query token, on a machine with the panel GEMM (AVX2).
bool IsTiledPrefill(const PagedKv<float>& kv, int32_t s);

// Attends the query tokens of every sequence for which IsTiledPrefill holds
// and writes their rows of p.out; other rows are left alone.
//
// Work items are (sequence, kv head, tile of up to kTileTokens query tokens):
// the tile's query heads of that kv head form the rows of Q (scaled by
// p.scale), and its context streams by in chunks of 16 positions, whichever
// blocks hold them: S = Q K^T and O += P V run on the panel GEMM
// (gemm_panels.h) with an online softmax in between (flash attention), so a
// chunk of K and V is read once per tile instead of once per query token.
//
// Chunks start at multiples of 16 and each row's sums run in a fixed order,
// so a token's output does not depend on the tile or the step it is in.
void PrefillAttention(const PagedAttentionParams<float>& p, ParallelFor& pool);

}  // namespace loom::kernels::cpu
