//! Work spread over a scan's partitions.

/// `items` in at most `partitions` groups by their `bytes`: largest first, each to the group with
/// the fewest bytes so far. Empty groups are left out.
pub(crate) fn balance<T: Clone>(
    mut items: Vec<T>,
    partitions: usize,
    bytes: impl Fn(&T) -> u64,
) -> Vec<Vec<T>> {
    items.sort_by_key(|t| std::cmp::Reverse(bytes(t)));
    let mut groups: Vec<(u64, Vec<T>)> = vec![(0, Vec::new()); partitions];
    for item in items {
        if let Some(g) = groups.iter_mut().min_by_key(|g| g.0) {
            g.0 += bytes(&item);
            g.1.push(item);
        }
    }
    groups
        .into_iter()
        .map(|(_, items)| items)
        .filter(|items| !items.is_empty())
        .collect()
}
