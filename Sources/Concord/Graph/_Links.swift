extension _MapCore {
  /// Links `parent` to one occurrence of `child` in its value. The child gains an internal hold.
  ///
  /// - Complexity: O(1) amortized.
  func link(_ parent: _AnyNode, to child: _AnyNode, accessor: AnyObject, position: Int) {
    let parentExtras = parent.ensuredExtras
    let childExtras = child.ensuredExtras
    parentExtras.children.append(
      _ChildLink(
        child: child, accessor: accessor, position: position, backIndex: childExtras.parents.count))
    childExtras.parents.append(_ParentRef(parent: parent, slot: parentExtras.children.count - 1))
    child.internalHolds += 1
  }

  /// Drops every link from `parent` to its children; each child loses an internal hold.
  ///
  /// - Complexity: O(*k*) for *k* links: each back-reference is swap-removed in O(1), so a child
  ///   with many parents is not scanned.
  func unlinkChildren(of parent: _AnyNode) {
    guard let extras = parent.extras, !extras.children.isEmpty else { return }
    var slot = 0
    // NB: read the live array each time: a swap below may fix up a later link of this parent.
    while slot < extras.children.count {
      let link = extras.children[slot]
      let childExtras = link.child.extras.unsafelyUnwrapped
      let moved = childExtras.parents.removeLast()
      if link.backIndex < childExtras.parents.count {
        childExtras.parents[link.backIndex] = moved
        moved.parent.extras.unsafelyUnwrapped.children[moved.slot].backIndex = link.backIndex
      }
      link.child.internalHolds -= 1
      noteHoldDropped(link.child)
      slot += 1
    }
    extras.children.removeAll()
  }

  /// Replaces the links of `parent` with `links` (whose `backIndex` is ignored).
  ///
  /// - Complexity: O(old links + new links).
  func relink(_ parent: _AnyNode, to links: [_ChildLink]) {
    let old = parent.extras?.children ?? []
    if old.count == links.count
      && zip(old, links).allSatisfy({
        $0.child === $1.child && $0.accessor === $1.accessor && $0.position == $1.position
      })
    {
      return
    }
    if batch.recordsUndo { batch.undo.append(.links(parent, old)) }
    unlinkChildren(of: parent)
    for link in links {
      self.link(parent, to: link.child, accessor: link.accessor, position: link.position)
    }
  }
}
