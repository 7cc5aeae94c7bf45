// Links between nodes: a parent's `children` name where each nested occurrence sits in its
// value, and each child's `parents` point back at those links. A link is an internal hold on
// the child.

extension _MapCore {
  /// Links `parent` to one occurrence of `child` in its value. The child gains an internal hold.
  ///
  /// - Complexity: O(1) amortized.
  @usableFromInline
  func link(_ parent: _AnyNode, to child: _AnyNode, accessor: Int32, position: Int32) {
    unbuffer(child)
    let parentExtras = parent.extras
    let childExtras = child.extras
    parentExtras.children.append(
      _ChildLink(
        child: child, accessor: accessor, position: position,
        backIndex: Int32(childExtras.parents.count)))
    childExtras.parents.append(
      _ParentRef(parent: parent, slot: Int32(parentExtras.children.count - 1)))
    child.s.internalHolds += 1
  }

  /// Drops every link from `parent` to its children; each child loses an internal hold.
  ///
  /// - Complexity: O(*k*) for *k* links: each back-reference is swap-removed in O(1), so a child
  ///   with many parents is not scanned.
  func unlinkChildren(of parent: _AnyNode) {
    guard let extras = parent.s.extras, !extras.children.isEmpty else { return }
    var slot = 0
    // NB: read the live array each time: a swap below may fix up a later link of this parent.
    while slot < extras.children.count {
      let link = extras.children[slot]
      let childExtras = link.child.s.extras.unsafelyUnwrapped
      let moved = childExtras.parents.removeLast()
      if Int(link.backIndex) < childExtras.parents.count {
        childExtras.parents[Int(link.backIndex)] = moved
        moved.parent.s.extras.unsafelyUnwrapped.children[Int(moved.slot)].backIndex =
          link.backIndex
      }
      link.child.s.internalHolds -= 1
      noteHoldDropped(link.child)
      slot += 1
    }
    extras.children.removeAll()
  }

  /// Replaces the links of `parent` with `links` (whose `backIndex` is ignored). The caller has
  /// recorded the parent in the journal. Returns whether anything changed.
  ///
  /// - Complexity: O(old links + new links).
  @usableFromInline @discardableResult
  func relink<Links: Collection<_ChildLink>>(_ parent: _AnyNode, to links: Links) -> Bool {
    let old = parent.children
    if old.count == links.count && zip(old, links).allSatisfy({ $0.sameOccurrence(as: $1) }) {
      return false
    }
    unlinkChildren(of: parent)
    for link in links {
      self.link(parent, to: link.child, accessor: link.accessor, position: link.position)
    }
    return true
  }
}
