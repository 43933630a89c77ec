//! Clusters: copies of tableq on the nodes of a real Galera cluster (support::galera).

mod galera;
