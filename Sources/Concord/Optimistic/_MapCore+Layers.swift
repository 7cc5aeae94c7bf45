extension _MapCore {
  // MARK: Showing a value

  /// Makes `value`, stamped `stamp`, the value of `node` without writing the entities it
  /// nests: nested occurrences are linked to the entities as they are, and the node shows their
  /// current values. Its parents are patched as for any write. Logs nothing.
  @inlinable
  func show<T: Identifiable & Sendable>(
    _ value: consuming T, stamp: Stamp, in node: _EntityNode<T>
  ) {
    if !node.s.stamp._isSame(as: stamp) {
      journal.touch(node, audience)
      node.s.stamp = stamp
    }
    // NB: bit for bit the value shown, whatever its type: nothing to do. (A type that is not
    // `Equatable` would otherwise tell its observers of every write from outside.)
    // NB: compared in place, and the value taken (`consuming`) and moved in below: a copy of
    // either retained and released what it holds, on every lowering and raising by copy.
    guard !withUnsafeMutablePointer(to: &node.value, { _identical($0.pointee, value) }) else {
      return
    }
    // NB: an entity that nests nothing and that no parent shows: the pass would record the
    // node, give it the value, log the write (an event this drops) and mark the node for its
    // end to clear; there is nothing to link or settle. So showing it is the record and the
    // value (see `showsInPlace(_:)`).
    if showsInPlace(node) {
      journal.touch(node, audience)
      node.value = consume value
      return
    }
    let events = outbox.events.count
    let recording = outbox.recordsWrites
    outbox.recordsWrites = false
    defer {
      outbox.recordsWrites = recording
      outbox.forgetEvents(after: events)
    }
    pass.run(
      into: node, payload: value, stamp: nil, call: nil, verdict: .accepted, nesting: .link,
      mergeFromDepth: 1)
  }

  /// Whether `show` gives `node` its value directly, with no pass: an entity that nests
  /// nothing and that no parent shows (see `show(_:stamp:in:)`). `isExhaustive` turns this
  /// off, so that the differential tests (`OptimisticModelTests`) run both ways.
  @inlinable
  func showsInPlace(_ node: _AnyNode) -> Bool {
    !pass.isExhaustive && node.s.flags.contains(.leaf) && !node.hasParents
      && !node.s.bits.contains(.fresh) && !node.s.flags.contains(.alias)
  }

  // MARK: Writes from outside the layers

  /// Lowers every shadowed entity to its value underneath, for the write about to run, and
  /// lists what that write stores into.
  @usableFromInline
  func lowerShadows() {
    audience.underLayers = true
    outbox.recordsWrites = true
    // NB: each shadow borrowed from the order, which keeps it (rule 7 of `_Lifetime.swift`),
    // without a copy of the order: showing a value only links (`_Nesting.link` creates and
    // removes no entity), so it forgets no shadow. `eachShadow` stops the program if one
    // ever did.
    eachShadow { $0.lower(self) }
  }

  /// Calls `body` with each shadow, in order, borrowed from the order, for a body that
  /// changes neither the order nor the shadows in it.
  @inline(__always)
  func eachShadow(_ body: (_AnyShadow) -> Void) {
    let count = layers.order.count
    for index in 0..<count {
      Unmanaged.passUnretained(layers.order[index])._withUnsafeGuaranteedRef(body)
      precondition(
        layers.order.count == count, "Concord: showing a layer's value changed the layers")
    }
  }

  /// Keeps what the write stored into shadowed entities as their values underneath, forgets
  /// the shadows of entities it removed, and raises every shadowed entity to its newest
  /// layer's value.
  func raiseShadows() {
    audience.underLayers = false
    outbox.recordsWrites = false
    if !outbox.written.isEmpty {
      // NB: the shadow unretained: the order or the index keeps it, and a retain and a
      // release of it went around each call.
      for index in outbox.written.indices {
        // NB: an exchanged entity's value becomes the one underneath when it is raised.
        let shadow = layers.unretainedShadow(of: outbox.written[index])
        shadow?._withUnsafeGuaranteedRef { if !$0.isExchanged { $0.keepAsBase() } }
      }
      // NB: its buffer kept for the next write: emptied, it gave back its memory, and every
      // write under a pending layer allocated a new one.
      outbox.written.removeAllKeepingCapacity()
    }
    // NB: each shadow borrowed from the order, as in `lowerShadows()`. The shadows to forget
    // leave the index in the loop and the order after it, which keeps each until then.
    var forgot = false
    eachShadow { shadow in
      guard shadow.isSpent else { return }
      // NB: a removal from outside wins over the layers: they forget the entity. A shadow
      // left with no layer shows its value underneath, which a commit may just have set.
      if shadow.node.isPresent { shadow.lower(self) }
      release(shadow)
      forgot = true
    }
    if forgot { layers.remove { $0.isSpent } }
    eachShadow { $0.raise(self) }
  }

  /// Called by a removal: `parents` lost nested entities. Their shadows keep what they show now
  /// as their value underneath and go: a removal wins over the layers of the aggregates that
  /// nested the entity.
  func removalPatched(_ parents: [_AnyNode]) {
    for parent in parents {
      guard let shadow = layers.shadow(of: parent) else { continue }
      shadow.keepAsBase()
      forget(shadow)
    }
  }

  /// Drops `shadow` and its hold on its entity.
  func forget(_ shadow: _AnyShadow) {
    release(shadow)
    layers.remove { $0 === shadow }
  }

  /// Drops `shadow` from the shadowed entities, and its hold on its entity, leaving it in the
  /// order of the layers: for a caller that takes it out of the order itself.
  func release(_ shadow: _AnyShadow) {
    // NB: an entity whose value the write exchanged (see `_Shadow._lower(_:)`) keeps the
    // value underneath, as a lowering by copy leaves it: a removed one, say, which a handle
    // may keep.
    shadow.markExchanged(false)
    layers.unindex(shadow)
    lifetime.dropExternalHold(on: shadow.node, graveyard: &outbox.graveyard)
  }

  // MARK: Layers

  /// Runs `body` as a new layer's writes and returns the layer. The caller holds the lock, in
  /// the outermost write, not lowered.
  func applyLayer(_ body: () throws -> Void) rethrows -> OptimisticLayer {
    let savepoint = beginTransaction()
    outbox.recordsWrites = true
    do {
      try runUserCode(body)
    } catch {
      outbox.recordsWrites = false
      outbox.written.removeAll()
      rollBack(to: savepoint)
      throw error
    }
    outbox.recordsWrites = false
    layers.lastSerial += 1
    let layer = OptimisticLayer(serial: layers.lastSerial, core: self)
    layers.pendingCount += 1
    // NB: the layer takes the list's buffer, and gives it back emptied for the next write.
    var written: [_AnyNode] = []
    swap(&written, &outbox.written)
    let records = _FirstRecords(journal.entries, scanningUpTo: pass.isExhaustive ? 0 : 16)
    for node in written where node.isPresent && node.s.flags.contains(.registered) {
      let existing = layers.shadow(of: node)
      // NB: listed more than once: a node this layer already shadows is on its shadow's top.
      // A node passed over below is passed over again, at the same cost as the first time.
      if let existing, existing.entries.last?.serial == layer.serial { continue }
      // NB: only what the layer changed: an entity stored as it was (say, nested in an
      // aggregate the layer updated) keeps following what happens underneath. Its state before
      // the layer is its first journal record (a node the layer wrote bit for bit as it was has
      // none, and is left alone).
      guard let index = records.index(of: node) else { continue }
      // NB: the two fields read, not the record copied, which retained and released its links.
      let saved = journal.entries[index].saved
      let stamp = journal.entries[index].stamp
      guard saved < 0 || !stamp._isSame(as: node.s.stamp) || node.witness.differs(node, saved)
      else { continue }
      let shadow: _AnyShadow
      if let existing {
        shadow = existing
      } else {
        guard let made = node.witness.makeShadow(node, saved, stamp) else {
          continue
        }
        shadow = made
        layers.add(made)
        lifetime.hold(node, pinning: self)
      }
      shadow.push(layer.serial)
      layer.nodes.append(node)
    }
    written.removeAllKeepingCapacity()
    swap(&written, &outbox.written)
    // A layer's removal is an ordinary removal: the layers below forget the entity.
    for shadow in layers.order where !shadow.node.isPresent { forget(shadow) }
    commitTransaction(savepoint)
    return layer
  }

  /// Ends `layer`, in a write that lowered the shadowed entities: commit makes its values the
  /// values underneath, unless a newer stamp is there; rollback forgets them, and removes what
  /// only it created. The write's end raises what is left.
  func finish(_ layer: OptimisticLayer, commit: Bool) {
    guard !layer.hasEnded else { return }
    layer.markEnded()
    layers.pendingCount -= 1
    // NB: taken out of the layer, which keeps nothing once it ended: iterated in place, the
    // list was copied (and what it holds retained) and then emptied.
    var nodes = _InlineList<_AnyNode>()
    swap(&nodes, &layer.nodes)
    for node in nodes {
      // NB: the shadow unretained: the order keeps it until `forget` takes it out.
      guard let found = layers.unretainedShadow(of: node) else { continue }
      let goes = found._withUnsafeGuaranteedRef { shadow in
        // NB: the entity will not show what it showed before the write, which its lowering by
        // exchange did not record when nobody compared with it (see `_Shadow._lower(_:)`):
        // the store, at least, must hear of it, if there is one. With no one to read the
        // record, the write needs none (and a rollback publishes nothing through the journal).
        if shadow.isExchanged && journal.isRead(node, audience) { journal.touch(node, audience) }
        // NB: the rollback of the only layer over the entity: the write lowered it, so it shows
        // its value underneath, for good, and the shadow goes as it is, with nothing popped.
        // (The write's end would lower it again, to show the same value.)
        if !commit && node.isPresent && shadow.entries.count == 1
          && shadow.entries[0].serial == layer.serial
        {
          return true
        }
        if commit { shadow.commit(layer.serial) }
        shadow.pop(layer.serial)
        // NB: otherwise the shadow stays for the write's end, which shows the entity's value
        // underneath (after a commit that left no layer over it, the layer's) and forgets it
        // when no layer is left; but an entity no commit gave a value underneath, which only
        // layers created, goes now.
        return shadow.entries.isEmpty && node.isPresent && !shadow.baseExists
      }
      guard goes else { continue }
      let shadow = found.takeUnretainedValue()
      // NB: an entity only layers created, and none is over it now, goes too.
      let created = !shadow.baseExists
      forget(shadow)
      if created { remove([node]) }
    }
  }

  /// Commits or rolls back `layer` now, or when the write this thread is inside ends. With
  /// `answer`, commits it and stores the server's answer in the same write (see
  /// `OptimisticLayer.commit(confirmedBy:)`); after the layer ended, only stores the answer.
  /// `dropped`: the layer's deinit calls, which must not keep the layer (see `heir()`).
  func end(
    _ layer: OptimisticLayer, commit: Bool, dropped: Bool = false,
    answer: ((_MapCore) -> Void)? = nil
  ) {
    // NB: a layer that ended stays ended, so there is nothing to do and no lock to take (a
    // second `rollback()` or `commit()`, say; the handle's deinit asks first itself).
    if answer == nil && layer.hasEnded { return }
    lock.lock()
    guard !layer.hasEnded || answer != nil else {
      lock.unlock()
      return
    }
    guard frame.depth == 0 else {
      layers.deferred.append(
        _LayerEnd(layer: dropped ? layer.heir() : layer, commit: commit, answer: answer))
      lock.unlock()
      return
    }
    // NB: the write takes over the hold this took: giving it back and taking the lock again
    // cost a second acquisition on every commit and rollback.
    writeHoldingLock(lowering: true) {
      guard let answer else { return finish(layer, commit: commit) }
      // NB: the answer is the server's truth about what the layer wrote: an equal stamp
      // applies to those entities (and only while the layer is pending).
      if !layer.hasEnded {
        pass.confirming = Set(layer.nodes.lazy.map(ObjectIdentifier.init))
        finish(layer, commit: true)
      }
      defer { pass.confirming = [] }
      answer(self)
    }
  }

  /// Ends the layers whose commit or rollback was asked for inside the write that just ended.
  ///
  /// NB: the map holds itself meanwhile. Each layer ends in a write of its own, which may give
  /// back the last hold that pinned the map (a shadow's) and so the map's retain of itself,
  /// while the caller, the end of a write reached through a handle's deinit, may hold the map
  /// unretained.
  func endDeferredLayers(_ deferred: [_LayerEnd]) {
    withExtendedLifetime(self) {
      for end in deferred { self.end(end.layer, commit: end.commit, answer: end.answer) }
    }
  }
}
