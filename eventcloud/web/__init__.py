"""EventCloud on the web: an HTTP gateway to the overlay (`eventcloud gateway`).

One concept per module: `http` (requests, responses, errors, content negotiation), `sparql`
(the SPARQL 1.1 Protocol's query operation), `publishing` (RDF bodies to events), `sse`
(Server-Sent Events framing), `messages` (notification JSON, the WebSocket protocol),
`status` (the status JSON), `overlay` (the I/O adapter: SDK connections), `live` (SSE streams
and WebSocket sessions), `app` (routes, authentication, CORS), `server` (hypercorn). The
dashboard's page is in `static/`. docs/web.md describes the routes.
"""
