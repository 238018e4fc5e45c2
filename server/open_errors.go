package server

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/muxd/muxd/mux"
)

// channelCodes wraps an open handler so its OPEN_FAIL codes stay within
// the channel code set: JSON-RPC's own codes (-32602 for bad params) are
// for RPC errors only, so bad OPEN params fail with `protocol`, as an
// unknown kind or a bad window do. The message is kept.
func channelCodes(fn mux.OpenHandler) mux.OpenHandler {
	return func(ctx context.Context, ch *mux.Channel, params json.RawMessage) (any, error) {
		meta, err := fn(ctx, ch, params)
		var me *mux.Error
		if errors.As(err, &me) && me.Code < 0 {
			return nil, mux.NewError(mux.CodeProtocol, "%s", me.Message)
		}
		return meta, err
	}
}
