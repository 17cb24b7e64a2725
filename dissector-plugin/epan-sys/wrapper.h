/* The headers the MetaRoCE dissector plugin needs. */
#include <ws_version.h>
#include <epan/packet.h>
#include <epan/proto.h>
#include <epan/expert.h>
#include <epan/prefs.h>
#include <epan/conversation.h>
#include <epan/proto_data.h>
#include <epan/tap.h>
#include <epan/column-utils.h>
#include <epan/value_string.h>
#include <epan/decode_as.h>
