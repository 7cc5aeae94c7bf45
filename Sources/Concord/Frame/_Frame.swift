/// Who may write now.
@usableFromInline
enum _Phase {
  /// User code that may write runs: an `update` body, a transaction body.
  case open
  /// The engine runs. User code it calls (`==`, key paths, deinits) may read, not write.
  case engine
}

/// The write frame: how deep the lock-holding thread is in this map's calls, and who may write.
@usableFromInline
struct _Frame {
  /// How many frames of this map the thread holding the lock is inside.
  @usableFromInline var depth = 0
  @usableFromInline var phase = _Phase.engine

  @usableFromInline init() {}
}
