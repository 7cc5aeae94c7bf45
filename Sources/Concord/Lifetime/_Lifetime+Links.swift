// Links between nodes: a parent's `children` name where each nested occurrence sits in its
// value, and each child's `parents` point back at those links. A link is an internal hold on
// the child.

extension _Lifetime {
  /// Links `parent` to one occurrence of `child` in its value. The child gains an internal hold.
  ///
  /// - Complexity: O(1) amortized.
  @usableFromInline
  mutating func link(_ parent: _AnyNode, to child: _AnyNode, accessor: Int32, position: Int32) {
    unbuffer(child)
    // NB: the parent's extras borrowed, not retained: each retain and release is an atomic
    // operation, and a page of aggregates links every entity it holds. A child's first parent
    // needs no extras at all.
    let backIndex = Int32(child.parentCount)
    let slot = parent.withExtras { parentExtras in
      parentExtras.children.append(
        _ChildLink(child: child, accessor: accessor, position: position, backIndex: backIndex))
      return Int32(parentExtras.children.count - 1)
    }
    child.appendParent(_ParentRef(parent: parent, slot: slot))
    child.internalHolds += 1
  }

  /// Drops every link from `parent` to its children; each child loses an internal hold.
  ///
  /// - Complexity: O(*k*) for *k* links: each back-reference is swap-removed in O(1), so a child
  ///   with many parents is not scanned.
  @usableFromInline
  mutating func unlinkChildren(of parent: _AnyNode) {
    guard let extras = parent.s.extras, !extras.children.isEmpty else { return }
    var slot = 0
    // NB: read the live array each time: a swap below may fix up a later link of this parent.
    while slot < extras.children.count {
      let link = extras.children[slot]
      // NB: borrowed (rule 7 of `_Lifetime.swift`): a linked child is in the map (rule 4), or
      // in the graveyard of the write taking it out (rule 3).
      Unmanaged.passUnretained(link.child)._withUnsafeGuaranteedRef { child in
        let moved = child.removeLastParent()
        if Int(link.backIndex) < child.parentCount {
          child.setParent(moved, at: Int(link.backIndex))
          // NB: borrowed: the child's other parent links it, so it is still there (rule 5).
          Unmanaged.passUnretained(moved.parent)._withUnsafeGuaranteedRef {
            $0.s.extras.unsafelyUnwrapped.children[Int(moved.slot)].backIndex = link.backIndex
          }
        }
        child.internalHolds -= 1
        noteHoldDropped(child)
      }
      slot += 1
    }
    extras.children.removeAll()
  }

  /// Replaces the links of `parent` with a claim's links in the pass; see `relink(_:to:)`.
  ///
  /// NB: not generic, so that inlinable callers in other modules reach the copy of `relink`
  /// specialized here: unspecialized, it walked the links through protocol witnesses.
  @usableFromInline @discardableResult
  mutating func relink(_ parent: _AnyNode, toClaimLinks links: _PassLinks) -> Bool {
    relink(parent, to: links)
  }

  /// Replaces the links of `parent` with `links` (whose `backIndex` is ignored). The caller has
  /// recorded the parent in the journal. Returns whether anything changed.
  ///
  /// - Complexity: O(old links + new links).
  @usableFromInline @discardableResult
  mutating func relink<Links: Collection<_ChildLink>>(_ parent: _AnyNode, to links: Links) -> Bool {
    // NB: the old links compared in place, borrowed: copying the array retained it.
    let unchanged =
      parent.s.extras == nil
      ? links.isEmpty
      : parent.withExtras { extras in
        guard extras.children.count == links.count else { return false }
        var index = links.startIndex
        for slot in extras.children.indices {
          guard extras.children[slot].sameOccurrence(as: links[index]) else { return false }
          links.formIndex(after: &index)
        }
        return true
      }
    if unchanged { return false }
    unlinkChildren(of: parent)
    // NB: one allocation for a new parent's links, not one per doubling.
    if !links.isEmpty { parent.withExtras { $0.children.reserveCapacity(links.count) } }
    for link in links {
      // NB: each child borrowed, not retained (rule 7): the caller's links name nodes in the
      // map, or in the graveyard of this write (rules 3 and 4).
      Unmanaged.passUnretained(link.child)._withUnsafeGuaranteedRef {
        self.link(parent, to: $0, accessor: link.accessor, position: link.position)
      }
    }
    return true
  }
}
