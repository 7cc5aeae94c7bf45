/// The slot of an alias: `Wrapped` is the entity type, or an array of it. `nil` while unset.
@usableFromInline
final class _AliasNode<Wrapped: Sendable>: _Node<Wrapped?> {
  @usableFromInline let id: _AliasID
  /// Whether the slot's changes reach the store: its entity type is persisted, and the slot was
  /// readied for it; see `_MapCore.prepareAlias(_:_:list:)`.
  @usableFromInline var persists = false

  @usableFromInline
  init(id: _AliasID, witness: _Witness) {
    self.id = id
    super.init(value: nil, witness: witness, flags: witness.flags)
  }
}
