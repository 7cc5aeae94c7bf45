import Concord

// Mastodon's shapes, as a client decodes them from its REST timelines and its user stream: a
// status nests its account and, for a boost, the status it boosts; its only server time is
// `edited_at ?? created_at`, which a favourite does not change. A notification nests the status
// it is about.

struct MastodonAccount: Identifiable, Sendable, Equatable {
  var id: String
  var acct: String
}

struct MastodonStatus: Aggregate, Stamped, Equatable {
  var id: String
  var content: String
  var createdAt: Double
  var editedAt: Double?
  var favouritesCount = 0
  var account: MastodonAccount
  /// The boosted status; stored in an array, which gives the recursive value its indirection.
  var boosted: [MastodonStatus] = []

  var reblog: MastodonStatus? {
    get { boosted.first }
    set { boosted = newValue.map { [$0] } ?? [] }
  }

  var stamp: Stamp? { editedAt ?? createdAt }

  static var nestedEntities: [NestedEntity<MastodonStatus>] { [.init(\.account), .init(\.reblog)] }
}

/// The same status, read by a client that drops a boost whose status was deleted.
struct MastodonBoostingStatus: Aggregate, Stamped, Equatable {
  var id: String
  var content: String
  var createdAt: Double
  var boosted: [MastodonStatus] = []

  var reblog: MastodonStatus? {
    get { boosted.first }
    set { boosted = newValue.map { [$0] } ?? [] }
  }

  var stamp: Stamp? { createdAt }

  static var nestedEntities: [NestedEntity<MastodonBoostingStatus>] {
    [.init(\.reblog, onRemoval: .removeParent)]
  }
}

struct MastodonNotification: Aggregate, Equatable {
  var id: String
  var type: String
  var status: MastodonStatus?

  static var nestedEntities: [NestedEntity<MastodonNotification>] { [.init(\.status)] }
}

extension MastodonStatus {
  static let gruff = MastodonAccount(id: "1", acct: "gruff")
  static let ged = MastodonAccount(id: "2", acct: "ged")

  /// Status `id` by gruff, posted at `createdAt`.
  static func post(_ id: String, _ content: String, at createdAt: Double, edited: Double? = nil)
    -> MastodonStatus
  {
    MastodonStatus(id: id, content: content, createdAt: createdAt, editedAt: edited, account: gruff)
  }

  /// Ged's boost `id` of `status`, made at `createdAt`.
  static func boost(_ id: String, of status: MastodonStatus, at createdAt: Double)
    -> MastodonStatus
  {
    MastodonStatus(
      id: id, content: "", createdAt: createdAt, account: ged, boosted: [status])
  }
}
