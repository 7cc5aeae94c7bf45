import Foundation

#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// A tiny HTTP/1.1 server on 127.0.0.1, for tests that drive a real `URLSession`: it serves
/// recorded JSON fixtures by path, each with an `ETag`, answers a matching `If-None-Match` with
/// `304 Not Modified`, and records every request.
///
/// One thread accepts connections and answers each in turn (`Connection: close`): enough for
/// tests, and simple enough to trust. POSIX sockets only, no dependency.
///
/// ```swift
/// let server = try LoopbackHTTPServer(routes: ["/user": .json(#"{"id": 1}"#, etag: "\"v1\"")])
/// defer { server.stop() }
/// let (data, _) = try await URLSession.shared.data(from: server.url("/user"))
/// ```
public final class LoopbackHTTPServer: @unchecked Sendable {
  // NB: @unchecked because `routes` and `recorded` are only touched while holding `lock`, and
  // `socket` is set once, before the thread starts.

  /// What the server answers for a path.
  public struct Route: Sendable {
    public var status: Int
    public var body: String
    public var etag: String?

    public init(status: Int = 200, body: String, etag: String? = nil) {
      self.status = status
      self.body = body
      self.etag = etag
    }

    /// A JSON body, served with its `ETag`.
    public static func json(_ body: String, etag: String?) -> Route {
      Route(body: body, etag: etag)
    }
  }

  /// One request the server received.
  public struct Request: Sendable, Equatable {
    public var method: String
    public var path: String
    public var ifNoneMatch: String?
    /// The status the server answered with.
    public var status: Int

    public init(method: String, path: String, ifNoneMatch: String?, status: Int) {
      self.method = method
      self.path = path
      self.ifNoneMatch = ifNoneMatch
      self.status = status
    }
  }

  private let lock = NSLock()
  private var routes: [String: Route]
  private var recorded: [Request] = []
  private let socket: Int32
  /// The port the server listens on.
  public let port: UInt16
  private let stopped = DispatchSemaphore(value: 0)

  /// Starts a server on an ephemeral port of 127.0.0.1.
  public init(routes: [String: Route]) throws {
    self.routes = routes
    #if canImport(Darwin)
      let stream = SOCK_STREAM
    #else
      let stream = Int32(SOCK_STREAM.rawValue)
    #endif
    let listening = openSocket(AF_INET, stream, 0)
    guard listening >= 0 else { throw ServerError("socket", errno) }
    var yes: Int32 = 1
    setsockopt(
      listening, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
    var address = sockaddr_in()
    #if canImport(Darwin)
      address.sin_len = UInt8(MemoryLayout<sockaddr_in>.size)
    #endif
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = 0
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let bound = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(listening, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    guard bound == 0, listen(listening, 64) == 0 else {
      close(listening)
      throw ServerError("bind/listen", errno)
    }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        getsockname(listening, $0, &length)
      }
    }
    socket = listening
    port = UInt16(bigEndian: address.sin_port)
    let thread = Thread { [self] in serve() }
    thread.name = "LoopbackHTTPServer"
    thread.start()
  }

  /// The URL of `path` on the server.
  public func url(_ path: String) -> URL {
    URL(string: "http://127.0.0.1:\(port)\(path)")!
  }

  /// Every request received, in order.
  public var requests: [Request] {
    lock.withLock { recorded }
  }

  /// Serves `route` at `path` from now on.
  public func set(_ path: String, _ route: Route) {
    lock.withLock { routes[path] = route }
  }

  /// Stops accepting connections, and waits for the thread to end.
  public func stop() {
    shutdown(socket, Int32(SHUT_RDWR))
    close(socket)
    stopped.wait()
  }

  // MARK: Serving

  private func serve() {
    defer { stopped.signal() }
    while true {
      let connection = accept(socket, nil, nil)
      guard connection >= 0 else {
        if errno == EINTR { continue }
        return
      }
      answer(connection)
      close(connection)
    }
  }

  /// Reads one request from `connection` and answers it.
  private func answer(_ connection: Int32) {
    var received: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4_096)
    let end: [UInt8] = Array("\r\n\r\n".utf8)
    while received.firstRange(of: end) == nil {
      let count = buffer.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
      guard count > 0 else { return }
      received += buffer[..<count]
    }
    let head = String(decoding: received, as: UTF8.self)
    let lines = head.components(separatedBy: "\r\n")
    let parts = lines.first?.split(separator: " ") ?? []
    guard parts.count >= 2 else { return }
    let method = String(parts[0])
    let path = String(parts[1])
    var ifNoneMatch: String?
    for line in lines.dropFirst() {
      guard let colon = line.firstIndex(of: ":") else { continue }
      if line[..<colon].lowercased() == "if-none-match" {
        ifNoneMatch = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
      }
    }
    let route = lock.withLock { routes[path] }
    var status = route?.status ?? 404
    var body = route?.body ?? #"{"message": "Not Found"}"#
    if let etag = route?.etag, status == 200, ifNoneMatch == etag {
      status = 304
      body = ""
    }
    lock.withLock {
      recorded.append(Request(method: method, path: path, ifNoneMatch: ifNoneMatch, status: status))
    }
    let reason =
      [
        200: "OK", 304: "Not Modified", 404: "Not Found", 500: "Internal Server Error",
        503: "Service Unavailable",
      ][status] ?? "Status"
    var response = "HTTP/1.1 \(status) \(reason)\r\n"
    if let etag = route?.etag { response += "ETag: \(etag)\r\n" }
    if status != 304 {
      response += "Content-Type: application/json\r\n"
      response += "Content-Length: \(body.utf8.count)\r\n"
    }
    response += "Connection: close\r\n\r\n" + body
    var bytes = Array(response.utf8)[...]
    while !bytes.isEmpty {
      // NB: a client that went away must not stop the test process with SIGPIPE.
      #if canImport(Darwin)
        let flags: Int32 = 0
      #else
        let flags = Int32(MSG_NOSIGNAL)
      #endif
      let sent = bytes.withUnsafeBytes { send(connection, $0.baseAddress, $0.count, flags) }
      guard sent > 0 else { return }
      bytes = bytes.dropFirst(sent)
    }
  }
}

/// A failed socket call.
struct ServerError: Error, CustomStringConvertible {
  let call: String
  let code: Int32
  init(_ call: String, _ code: Int32) {
    self.call = call
    self.code = code
  }
  var description: String { "\(call) failed: errno \(code)" }
}

/// `socket(2)`, whose name the server's own `socket` property shadows.
private func openSocket(_ domain: Int32, _ type: Int32, _ proto: Int32) -> Int32 {
  socket(domain, type, proto)
}
