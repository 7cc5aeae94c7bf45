/// A logger that prints, for each change a write commits, what changed, field by field, with
/// the old and new values:
///
/// ```swift
/// let map = IdentityMap(logger: DiffLogger())
/// map.store(Author(id: 1, name: "Ursula"))
/// // Author(1) inserted: Author(id: 1, name: "Ursula")
/// map.store(Author(id: 1, name: "Ursula K. Le Guin"))
/// // Author(1).name: "Ursula" → "Ursula K. Le Guin"
/// ```
///
/// - An insertion or a removal prints one line.
/// - An update prints one line per field that changed, at any depth (`Issue(7).milestone.title`).
///   Collections print only the elements that changed: by id when the elements are
///   `Identifiable` (`Issue(7).labels[id: 3].name`, `… [id: 4] added: …`), by position
///   otherwise. Dictionaries are compared key by key, optionals and enums through their payload.
/// - A write to an aggregate prints the aggregate's lines and each nested entity's own.
/// - A transaction prints one diff per entity, from its value before the transaction to its
///   value at commit; one that ends where it began prints nothing. (An entity removed and stored
///   again is a new entity: `removed`, then `inserted`.)
/// - A value that changed by `==` but shows the same text (a `Date` moved by milliseconds)
///   still prints a line.
///
/// It reads values through `Mirror`, after the map's lock is released, on the writing thread.
/// Its ``logsChangedValues`` is `true`, which makes the map keep each changed entity's old value
/// and send every write through its change log: a cost for debugging, paid only while a logger
/// asks for it. Other events (stale writes, releases) are not printed.
public struct DiffLogger: IdentityMapLogger {
  private let output: @Sendable (String) -> Void

  /// Creates a logger writing each line to `output`, which prints by default.
  public init(output: @escaping @Sendable (String) -> Void = { print($0) }) {
    self.output = output
  }

  /// `true`: the map logs ``IdentityMapEvent/Kind/changed`` events with their values.
  public var logsChangedValues: Bool { true }

  /// Prints the lines of a ``IdentityMapEvent/Kind/changed`` event; ignores the others.
  public func log(_ event: IdentityMapEvent) {
    guard event.kind == .changed, let entity = event.entity else { return }
    for line in Self.lines(for: entity, before: event.valueBefore, after: event.valueAfter) {
      output(line)
    }
  }

  /// The lines printed for a change of `entity` from `before` to `after`.
  static func lines(
    for entity: EntityReference, before: (any Sendable)?, after: (any Sendable)?
  ) -> [String] {
    switch (before, after) {
    case (nil, let after?): return ["\(entity) inserted: \(_render(after))"]
    case (_?, nil): return ["\(entity) removed"]
    case (let before?, let after?):
      var lines: [String] = []
      _diff(before, after, at: entity.description, into: &lines)
      return lines
    case (nil, nil): return []
    }
  }
}

/// How deep a rendering or a diff goes: a value that holds itself (a class with a reference
/// back to its parent) stops there.
let _maxDepth = 32

/// The fields of a value, a class's inherited ones first.
func _fields(_ mirror: Mirror) -> [Mirror.Child] {
  (mirror.superclassMirror.map(_fields) ?? []) + Array(mirror.children)
}

/// A field as a rendering shows it: `label: value`, or the value alone in a tuple.
func _renderField(_ field: Mirror.Child, depth: Int) -> String {
  (field.label.map { "\($0): " } ?? "") + _render(field.value, depth: depth + 1)
}

/// A value as a diff line shows it: text quoted, an optional as its value or `nil`, a value
/// whose type describes itself (`Date`, `URL`, `UUID`) by its description, others field by
/// field with their type's short name (`Label(id: 3, name: "bug")`). A collection shows its
/// first `_shownElements` elements (a set's sorted by their text) and how many more there are.
func _render(_ value: Any, depth: Int = 0) -> String {
  switch value {
  case let text as String: return String(reflecting: text)
  case let text as Substring: return String(reflecting: text)
  case let character as Character: return String(reflecting: character)
  default: break
  }
  guard depth < _maxDepth else { return "…" }
  let mirror = Mirror(reflecting: value)
  switch mirror.displayStyle {
  case .optional:
    return mirror.children.first.map { _render($0.value, depth: depth + 1) } ?? "nil"
  case _ where _isLeaf(value, mirror):
    return String(describing: value)
  case .collection:
    return "[" + _renderList(mirror.children.map { _render($0.value, depth: depth + 1) }) + "]"
  case .set:
    return "["
      + _renderList(mirror.children.map { _render($0.value, depth: depth + 1) }.sorted()) + "]"
  case .dictionary:
    let entries = mirror.children.map { entry -> String in
      let pair = Mirror(reflecting: entry.value).children.map(\.value)
      guard pair.count == 2 else { return _render(entry.value, depth: depth + 1) }
      return "\(_render(pair[0], depth: depth + 1)): \(_render(pair[1], depth: depth + 1))"
    }
    return entries.isEmpty ? "[:]" : "[" + _renderList(entries.sorted()) + "]"
  case .enum:
    guard let payload = mirror.children.first else { return String(describing: value) }
    let fields = Mirror(reflecting: payload.value)
    let inner =
      fields.displayStyle == .tuple
      ? fields.children.map { _renderField($0, depth: depth) }.joined(separator: ", ")
      : _render(payload.value, depth: depth + 1)
    return "\(payload.label ?? "")(\(inner))"
  case .tuple:
    return "(" + mirror.children.map { _renderField($0, depth: depth) }.joined(separator: ", ")
      + ")"
  default:
    let fields = _fields(mirror).map { _renderField($0, depth: depth) }
    return "\(type(of: value))(" + fields.joined(separator: ", ") + ")"
  }
}

/// How many elements of a collection a line shows.
let _shownElements = 20

/// The first `_shownElements` items, then how many more there are.
func _renderList(_ items: [String]) -> String {
  guard items.count > _shownElements else { return items.joined(separator: ", ") }
  return items.prefix(_shownElements).joined(separator: ", ")
    + ", … (\(items.count - _shownElements) more)"
}

/// Whether `value` is shown and compared as a whole: it has no fields to show, or its type
/// describes itself (`CustomStringConvertible`, as `Date`, `URL` and `UUID` do).
func _isLeaf(_ value: Any, _ mirror: Mirror) -> Bool {
  switch mirror.displayStyle {
  case .struct, .class: return _fields(mirror).isEmpty || value is any CustomStringConvertible
  case .enum: return value is any CustomStringConvertible
  case nil: return true
  default: return false
  }
}

/// Appends to `lines` what differs between `old` and `new`, the values at `path`.
func _diff(_ old: Any, _ new: Any, at path: String, into lines: inout [String], depth: Int = 0) {
  let equal = (old as? any Equatable)?._isEqual(to: new)
  if equal == true { return }
  // NB: when `==` says they differ, a line is printed even if their texts are the same.
  let differs = equal == false
  let oldMirror = Mirror(reflecting: old)
  let newMirror = Mirror(reflecting: new)
  guard depth < _maxDepth, type(of: old) == type(of: new),
    oldMirror.displayStyle == newMirror.displayStyle, !_isLeaf(old, oldMirror)
  else { return _diffLeaf(old, new, at: path, into: &lines, differs: differs) }
  switch oldMirror.displayStyle {
  case .optional:
    switch (oldMirror.children.first?.value, newMirror.children.first?.value) {
    case (let old?, let new?): _diff(old, new, at: path, into: &lines, depth: depth + 1)
    case (nil, nil): break
    default: _diffLeaf(old, new, at: path, into: &lines, differs: differs)
    }
  case .collection, .set:
    _diffElements(
      oldMirror.children.map(\.value), newMirror.children.map(\.value), at: path,
      ordered: oldMirror.displayStyle == .collection, into: &lines, depth: depth)
  case .dictionary:
    _diffDictionaries(oldMirror, newMirror, at: path, into: &lines, depth: depth)
  case .enum:
    // The same case: compare the payloads; another case: the whole value.
    guard let oldCase = oldMirror.children.first, let newCase = newMirror.children.first,
      oldCase.label == newCase.label
    else { return _diffLeaf(old, new, at: path, into: &lines, differs: differs) }
    _diff(oldCase.value, newCase.value, at: path, into: &lines, depth: depth + 1)
  default:
    let oldFields = _fields(oldMirror)
    let newFields = _fields(newMirror)
    guard oldFields.count == newFields.count else {
      return _diffLeaf(old, new, at: path, into: &lines, differs: differs)
    }
    let before = lines.count
    for (index, (oldField, newField)) in zip(oldFields, newFields).enumerated() {
      let label = oldField.label ?? ".\(index)"
      _diff(oldField.value, newField.value, at: "\(path).\(label)", into: &lines, depth: depth + 1)
    }
    if differs && lines.count == before {
      lines.append("\(path): changed, though no field shows a difference")
    }
  }
}

/// A line for a value that changed as a whole. When both show the same text, the line uses
/// `String(reflecting:)`, or says so; without `differs`, same texts print nothing.
func _diffLeaf(
  _ old: Any, _ new: Any, at path: String, into lines: inout [String], differs: Bool
) {
  var oldText = _render(old)
  var newText = _render(new)
  if oldText == newText {
    guard differs else { return }
    oldText = String(reflecting: old)
    newText = String(reflecting: new)
    guard oldText != newText else {
      lines.append("\(path): changed, though both show \(oldText)")
      return
    }
  }
  lines.append("\(path): \(oldText) → \(newText)")
}

/// The elements of two collections that differ: matched by id when every element is
/// `Identifiable` and no id is repeated, by position otherwise. A set's elements are sorted by
/// their text first, so that its lines come in the same order on every run.
func _diffElements(
  _ old: [Any], _ new: [Any], at path: String, ordered: Bool, into lines: inout [String],
  depth: Int
) {
  var old = old
  var new = new
  if !ordered {
    old = old.map { ($0, _render($0)) }.sorted { $0.1 < $1.1 }.map(\.0)
    new = new.map { ($0, _render($0)) }.sorted { $0.1 < $1.1 }.map(\.0)
  }
  if let oldIDs = _ids(of: old), let newIDs = _ids(of: new),
    Set(oldIDs).count == oldIDs.count, Set(newIDs).count == newIDs.count
  {
    let oldByID = Dictionary(uniqueKeysWithValues: zip(oldIDs, old.indices))
    let newSet = Set(newIDs)
    for (index, id) in oldIDs.enumerated() where !newSet.contains(id) {
      lines.append("\(path)[id: \(_text(of: id))] removed: \(_render(old[index]))")
    }
    for (index, id) in newIDs.enumerated() {
      let element = "\(path)[id: \(_text(of: id))]"
      if let oldIndex = oldByID[id] {
        _diff(old[oldIndex], new[index], at: element, into: &lines, depth: depth + 1)
      } else {
        lines.append("\(element) added: \(_render(new[index]))")
      }
    }
    if ordered && newIDs.filter({ oldByID[$0] != nil }) != oldIDs.filter(newSet.contains) {
      lines.append("\(path): reordered")
    }
    return
  }
  guard ordered else {
    // A set of values that are not Identifiable: what left it and what joined it.
    let oldTexts = old.map { _render($0) }
    let newTexts = new.map { _render($0) }
    for text in oldTexts where !newTexts.contains(text) { lines.append("\(path) removed: \(text)") }
    for text in newTexts where !oldTexts.contains(text) { lines.append("\(path) added: \(text)") }
    return
  }
  for index in 0..<min(old.count, new.count) {
    _diff(old[index], new[index], at: "\(path)[\(index)]", into: &lines, depth: depth + 1)
  }
  for index in new.count..<max(new.count, old.count) {
    lines.append("\(path)[\(index)] removed: \(_render(old[index]))")
  }
  for index in old.count..<max(old.count, new.count) {
    lines.append("\(path)[\(index)] added: \(_render(new[index]))")
  }
}

/// The ids of `elements`, if every one is `Identifiable`.
func _ids(of elements: [Any]) -> [AnyHashable]? {
  var ids: [AnyHashable] = []
  ids.reserveCapacity(elements.count)
  for element in elements {
    guard let identifiable = element as? any Identifiable else { return nil }
    ids.append(_id(of: identifiable))
  }
  return ids
}

/// The id of `element`, opened from an existential.
func _id<Element: Identifiable>(of element: Element) -> AnyHashable { AnyHashable(element.id) }

/// An id or a key as a path shows it: strings quoted, other values as they describe themselves.
func _text(of key: AnyHashable) -> String {
  if let string = key.base as? String { return String(reflecting: string) }
  return String(describing: key.base)
}

/// The entries of two dictionaries that differ, key by key.
func _diffDictionaries(
  _ old: Mirror, _ new: Mirror, at path: String, into lines: inout [String], depth: Int
) {
  func entries(_ mirror: Mirror) -> [(key: String, value: Any)] {
    mirror.children.map { entry in
      let pair = Array(Mirror(reflecting: entry.value).children)
      let key = pair.first.map { ($0.value as? AnyHashable).map(_text) ?? _render($0.value) } ?? "?"
      return (key, pair.count > 1 ? pair[1].value : entry.value)
    }.sorted { $0.key < $1.key }
  }
  let oldEntries = entries(old)
  let newEntries = entries(new)
  let oldByKey = Dictionary(oldEntries.map { ($0.key, $0.value) }, uniquingKeysWith: { a, _ in a })
  let newByKey = Dictionary(newEntries.map { ($0.key, $0.value) }, uniquingKeysWith: { a, _ in a })
  for entry in oldEntries where newByKey[entry.key] == nil {
    lines.append("\(path)[\(entry.key)] removed: \(_render(entry.value))")
  }
  for entry in newEntries {
    if let oldValue = oldByKey[entry.key] {
      _diff(oldValue, entry.value, at: "\(path)[\(entry.key)]", into: &lines, depth: depth + 1)
    } else {
      lines.append("\(path)[\(entry.key)] added: \(_render(entry.value))")
    }
  }
}
