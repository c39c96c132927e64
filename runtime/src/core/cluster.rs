//! Free resources by concrete id, and allocation of requests onto them.
//!
//! Like Flux's R, an allocation names the exact cores and GPUs of each node
//! it uses, so the executor can bind to them. Copies (ranks) never span
//! nodes; `nodes=N` spreads them over exactly N nodes; otherwise they go
//! first-fit over the nodes in order, lowest free ids first (packing keeps
//! large holes for large tasks).

use smallvec::{SmallVec, smallvec};

use crate::ir::Request;
use crate::resources::Capacity;

/// What one task holds on one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSlice {
    pub node: u32,
    /// Copies (ranks) of the task on this node.
    pub ranks: u32,
    pub cores: Vec<u32>,
    pub gpus: Vec<u32>,
    pub mem: u64,
}

/// Everything one task holds.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Alloc {
    pub slices: Vec<NodeSlice>,
}

impl Alloc {
    pub fn cores(&self) -> usize {
        self.slices.iter().map(|s| s.cores.len()).sum()
    }
}

/// Amounts summed over the instance, for reservations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Amounts {
    pub cores: u64,
    pub gpus: u64,
    pub mem: u64,
}

impl Amounts {
    pub fn of(request: &Request) -> Amounts {
        Amounts {
            cores: request.total_cores(),
            gpus: request.total_gpus(),
            mem: request.total_mem(),
        }
    }

    pub fn covers(&self, need: &Amounts) -> bool {
        self.cores >= need.cores && self.gpus >= need.gpus && self.mem >= need.mem
    }

    pub fn add(&mut self, other: &Amounts) {
        self.cores += other.cores;
        self.gpus += other.gpus;
        self.mem += other.mem;
    }

    pub fn sub(&mut self, other: &Amounts) {
        self.cores = self.cores.saturating_sub(other.cores);
        self.gpus = self.gpus.saturating_sub(other.gpus);
        self.mem = self.mem.saturating_sub(other.mem);
    }
}

/// Ranks to place on each node: `(node, ranks)`; inline for a few nodes,
/// since backfilling plans many candidates per decision.
pub(crate) type Plan = SmallVec<[(u32, u32); 4]>;

/// What is free on one node.
#[derive(Debug, Clone, Copy, Default)]
struct Free {
    cores: u32,
    gpus: u32,
    mem: u64,
}

/// What is free on each node, as amounts without ids: enough to plan where
/// a request goes, and cheap to copy — backfilling projects the instance
/// into the future on a copy at every decision.
#[derive(Debug, Clone)]
pub struct Counts {
    nodes: Vec<Free>,
    free: Amounts,
}

impl Counts {
    /// Nothing in it: nothing fits.
    pub(crate) fn empty() -> Self {
        Counts {
            nodes: Vec::new(),
            free: Amounts::default(),
        }
    }

    /// Free amounts summed over nodes.
    pub fn free(&self) -> Amounts {
        self.free
    }

    fn ranks_fit(node: &Free, request: &Request) -> u64 {
        let mut fit = u64::MAX;
        if request.cores > 0 {
            fit = fit.min(node.cores as u64 / request.cores as u64);
        }
        if request.gpus > 0 {
            fit = fit.min(node.gpus as u64 / request.gpus as u64);
        }
        if let Some(by_mem) = node.mem.checked_div(request.mem) {
            fit = fit.min(by_mem);
        }
        fit
    }

    /// The ranks to place on each node, or `None` if the request does not
    /// fit now.
    pub(crate) fn plan(&self, request: &Request) -> Option<Plan> {
        if !self.free.covers(&Amounts::of(request)) {
            return None;
        }
        let mut plan = Plan::new();
        let mut left = request.ntasks as u64;
        if request.nodes == 0 {
            for (i, node) in self.nodes.iter().enumerate() {
                let take = Self::ranks_fit(node, request).min(left);
                if take > 0 {
                    plan.push((i as u32, take as u32));
                    left -= take;
                }
                if left == 0 {
                    return Some(plan);
                }
            }
            None
        } else {
            let per_node = left.div_ceil(request.nodes as u64);
            for (i, node) in self.nodes.iter().enumerate() {
                if plan.len() == request.nodes as usize {
                    break;
                }
                if Self::ranks_fit(node, request) >= per_node {
                    let take = per_node.min(left);
                    plan.push((i as u32, take as u32));
                    left -= take;
                }
            }
            (plan.len() == request.nodes as usize && left == 0).then_some(plan)
        }
    }

    pub fn fits(&self, request: &Request) -> bool {
        // One core per rank and nothing else: any free core hosts a rank,
        // so the sum decides (the common case of a simulated trace job).
        if request.cores == 1 && request.gpus == 0 && request.mem == 0 && request.nodes == 0 {
            return self.free.cores >= request.ntasks as u64;
        }
        self.plan(request).is_some()
    }

    /// Whether `plan` (ranks per node, as another instance placed them)
    /// also fits here, node by node.
    pub(crate) fn fits_plan(&self, plan: &[(u32, u32)], request: &Request) -> bool {
        plan.iter().all(|&(node, ranks)| {
            self.nodes
                .get(node as usize)
                .is_some_and(|n| Self::ranks_fit(n, request) >= ranks as u64)
        })
    }

    /// Takes what `plan` needs (the caller checked that it fits).
    pub(crate) fn take_plan(&mut self, plan: &[(u32, u32)], request: &Request) {
        let mut ranks_total = 0u64;
        for &(node, ranks) in plan {
            let n = &mut self.nodes[node as usize];
            n.cores -= ranks * request.cores;
            n.gpus -= ranks * request.gpus;
            n.mem -= ranks as u64 * request.mem;
            ranks_total += ranks as u64;
        }
        self.free.sub(&Amounts {
            cores: ranks_total * request.cores as u64,
            gpus: ranks_total * request.gpus as u64,
            mem: ranks_total * request.mem,
        });
    }

    /// Gives back what `alloc` holds.
    pub(crate) fn release(&mut self, alloc: &Alloc) {
        for slice in &alloc.slices {
            let n = &mut self.nodes[slice.node as usize];
            let back = Amounts {
                cores: slice.cores.len() as u64,
                gpus: slice.gpus.len() as u64,
                mem: slice.mem,
            };
            n.cores += back.cores as u32;
            n.gpus += back.gpus as u32;
            n.mem += back.mem;
            self.free.add(&back);
        }
    }
}

/// The free resources of an instance, by concrete id.
#[derive(Debug, Clone)]
pub struct Cluster {
    capacity: Capacity,
    counts: Counts,
    /// Free core and GPU ids of each node.
    ids: Vec<(IdSet, IdSet)>,
}

impl Cluster {
    pub fn new(capacity: Capacity) -> Self {
        let node = Free {
            cores: capacity.cores_per_node,
            gpus: capacity.gpus_per_node,
            mem: capacity.mem_per_node,
        };
        Cluster {
            capacity,
            counts: Counts {
                nodes: vec![node; capacity.nodes as usize],
                free: Amounts {
                    cores: capacity.total_cores(),
                    gpus: capacity.total_gpus(),
                    mem: capacity.total_mem(),
                },
            },
            ids: vec![
                (
                    IdSet::full(capacity.cores_per_node),
                    IdSet::full(capacity.gpus_per_node)
                );
                capacity.nodes as usize
            ],
        }
    }

    pub fn capacity(&self) -> Capacity {
        self.capacity
    }

    /// Free amounts summed over nodes.
    pub fn free(&self) -> Amounts {
        self.counts.free
    }

    /// What is free per node, without ids.
    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    pub(crate) fn plan(&self, request: &Request) -> Option<Plan> {
        self.counts.plan(request)
    }

    pub fn fits(&self, request: &Request) -> bool {
        self.counts.fits(request)
    }

    /// Takes concrete resources for `request`, or `None` if it does not fit.
    pub fn allocate(&mut self, request: &Request) -> Option<Alloc> {
        let plan = self.plan(request)?;
        let mut alloc = Alloc::default();
        for &(node, ranks) in &plan {
            let (cores, gpus) = &mut self.ids[node as usize];
            alloc.slices.push(NodeSlice {
                node,
                ranks,
                cores: cores.take(ranks * request.cores),
                gpus: gpus.take(ranks * request.gpus),
                mem: ranks as u64 * request.mem,
            });
        }
        self.counts.take_plan(&plan, request);
        Some(alloc)
    }

    pub fn release(&mut self, alloc: &Alloc) {
        for slice in &alloc.slices {
            let (cores, gpus) = &mut self.ids[slice.node as usize];
            slice.cores.iter().for_each(|&c| cores.insert(c));
            slice.gpus.iter().for_each(|&g| gpus.insert(g));
        }
        self.counts.release(alloc);
    }
}

/// A set of small ids as a bitmap; up to 256 ids live inline, so cloning a
/// cluster (backfilling projects one per decision) allocates nothing.
#[derive(Debug, Clone)]
struct IdSet {
    words: SmallVec<[u64; 4]>,
}

impl IdSet {
    fn full(n: u32) -> Self {
        let mut words: SmallVec<[u64; 4]> = smallvec![u64::MAX; n.div_ceil(64) as usize];
        if !n.is_multiple_of(64)
            && let Some(last) = words.last_mut()
        {
            *last = (1u64 << (n % 64)) - 1;
        }
        IdSet { words }
    }

    fn insert(&mut self, id: u32) {
        let word = &mut self.words[(id / 64) as usize];
        let bit = 1u64 << (id % 64);
        debug_assert!(*word & bit == 0, "id {id} freed twice");
        *word |= bit;
    }

    /// Removes and returns the `n` lowest ids (the caller checked `len`).
    fn take(&mut self, mut n: u32) -> Vec<u32> {
        let mut out = Vec::with_capacity(n as usize);
        for (i, word) in self.words.iter_mut().enumerate() {
            while n > 0 && *word != 0 {
                let bit = word.trailing_zeros();
                *word &= !(1u64 << bit);
                out.push(i as u32 * 64 + bit);
                n -= 1;
            }
            if n == 0 {
                break;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(ntasks: u32, cores: u32, gpus: u32, nodes: u32) -> Request {
        Request::new(ntasks, cores, gpus, nodes)
    }

    #[test]
    fn allocates_lowest_ids_and_releases_them() {
        let mut c = Cluster::new(Capacity {
            nodes: 1,
            cores_per_node: 4,
            gpus_per_node: 2,
            mem_per_node: 0,
        });
        let a = c.allocate(&req(2, 1, 1, 0)).unwrap();
        assert_eq!(a.slices[0].cores, [0, 1]);
        assert_eq!(a.slices[0].gpus, [0, 1]);
        assert!(c.allocate(&req(1, 1, 1, 0)).is_none(), "no GPU left");
        let b = c.allocate(&req(1, 2, 0, 0)).unwrap();
        assert_eq!(b.slices[0].cores, [2, 3]);
        c.release(&a);
        assert_eq!(c.free().cores, 2);
        assert_eq!(
            c.allocate(&req(1, 2, 0, 0)).unwrap().slices[0].cores,
            [0, 1]
        );
    }

    #[test]
    fn ranks_spread_over_nodes_but_a_rank_never_spans_two() {
        let mut c = Cluster::new(Capacity {
            nodes: 2,
            cores_per_node: 3,
            gpus_per_node: 0,
            mem_per_node: 0,
        });
        // 2 cores per rank: one rank per node, the third rank cannot fit.
        assert!(c.allocate(&req(3, 2, 0, 0)).is_none());
        let a = c.allocate(&req(2, 2, 0, 0)).unwrap();
        assert_eq!(
            a.slices
                .iter()
                .map(|s| (s.node, s.ranks))
                .collect::<Vec<_>>(),
            [(0, 1), (1, 1)]
        );
        // nodes=1 needs both ranks on one node.
        assert!(c.allocate(&req(2, 1, 0, 1)).is_none());
        assert!(c.allocate(&req(1, 1, 0, 1)).is_some());
    }
}
